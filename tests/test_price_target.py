"A price target (`--target close`) is forecast as the log change from the origin: about as good as persistence."
import pandas as pd
from tft_nb.cli import tft_train
import pytest

pytestmark = pytest.mark.slow   # the second tier (pytest.ini)

def test_close_target_is_as_good_as_persistence(tmp_path):
    "Before the change, a z-scored price level gave a test MAE about 15 times persistence's; now within a few percent."
    _, m = tft_train(target='close', epochs=3, hidden_size=16, attention_heads=2, lstm_layers=1, encoder_length=20,
                     batch_size=128, device='cpu', checkpoint_dir=str(tmp_path / 'ck'))
    print(m.round(4).to_string())
    mae = m['mae_P50']
    assert mae['TFT calibrated'] <= 1.05 * mae['persistence'], m.to_string()
    assert mae['TFT'] <= 1.10 * mae['persistence'], m.to_string()
    assert 20 < mae['persistence'] < 200, m.to_string()          # index points: the forecasts are prices
    assert pd.read_csv(tmp_path / 'ck' / 'metrics.csv').epoch.tolist() == [1, 2, 3]
