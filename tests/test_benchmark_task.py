"The benchmark task of bench/TASK.md, reproduced: baseline scores equal the reference harness's (section 11)."
import pytest
from tft_nb.data import load_sample
from tft_nb.data_config import PRESETS
from tft_nb.windows import make_windows
from tft_nb.evaluate import forecast_metrics, original_units
from tft_nb.baselines import baseline_forecast

# TASK.md section 11, test scores of the baselines computed by the reference harness run_peer.py
REFERENCE = {'persistence': (0.08364, 0.03806, 0.14135), 'rolling_mean': (0.07432, 0.03721, 0.12604),
             'garch11': (0.07522, 0.03430, 0.12661), 'har': (0.07024, 0.03407, 0.11881),
             'har_pooled': (0.07018, 0.03409, 0.11876)}   # section 8: har_task.py's reference scores

@pytest.mark.parametrize('kind', list(REFERENCE))
def test_baselines_match_reference(kind):
    d = make_windows(load_sample(), PRESETS['ohlcv_gk_logvol_tft_v1'])
    q = (0.1, 0.5, 0.9)
    y = original_units(d, d.test, d.test.targets().cpu())
    m = forecast_metrics(baseline_forecast(d, d.test, q, kind), y, q)
    assert (round(m['q_risk_P50'], 5), round(m['q_risk_P90'], 5), round(m['pinball'], 5)) == REFERENCE[kind]
