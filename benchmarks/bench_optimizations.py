"""Every registered optimization: step time, peak memory, accuracy, index and transfer bytes."""

from gnnbench.runner import Trainer

from . import common


class Optimization:
    """One training step of the baseline and of each optimization."""

    params = [common.OPTIMIZATIONS]
    param_names = ["optimization"]
    timeout = 600

    def setup(self, name):
        config = common.config_for(name)
        common.skip_if_unavailable(config)
        self.trainer = Trainer(config, graph=common.graph())
        for _ in range(3):  # warm-up: first touch, compilation
            self.trainer.train_step()

    def teardown(self, name):
        self.trainer.close()

    def time_step(self, name):
        self.trainer.train_step()

    def peakmem_step(self, name):
        self.trainer.train_step()


class OptimizationResults:
    """What a short training run with each optimization reports."""

    params = [common.OPTIMIZATIONS]
    param_names = ["optimization"]
    timeout = 600

    def setup(self, name):
        common.skip_if_unavailable(common.config_for(name))
        self.result = common.run_result(name)

    def track_accuracy(self, name):
        return 100.0 * self.result["accuracy"]["test"]

    track_accuracy.unit = "%"

    def track_step_median_ms(self, name):
        return 1e3 * self.result["step_seconds"]["median"]

    track_step_median_ms.unit = "ms"

    def track_index_bytes(self, name):
        return self.result["graph"]["index_bytes"]

    track_index_bytes.unit = "bytes"

    def track_transfer_bytes(self, name):
        return self.result["transfer"]["bytes_h2d_per_batch"]

    track_transfer_bytes.unit = "bytes"
