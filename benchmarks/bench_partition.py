"""Graph partitioning for partition-parallel training: METIS against degree buckets on ``tiny``."""

from gnnbench.parallel.partition import partition

from . import common


class Partition:
    params = [["metis", "degree"], [2, 4]]
    param_names = ["method", "parts"]

    def setup(self, method, parts):
        self.graph = common.graph()  # the tiny preset, built once per process

    def time_partition(self, method, parts):
        partition(self.graph, parts, method)

    def track_edge_cut(self, method, parts):
        return 100.0 * partition(self.graph, parts, method).edge_cut_fraction

    track_edge_cut.unit = "%"

    def track_edge_balance(self, method, parts):
        return partition(self.graph, parts, method).edge_balance

    track_edge_balance.unit = "ratio"
