"""Graph generation and preparation."""

from gnnbench import registry
from gnnbench.flags import Flags
from gnnbench.graphs import GraphSpec, generate
from gnnbench.graphs.prepare import prepare

from . import common


class Generate:
    params = [["tiny", "small"]]
    param_names = ["preset"]

    def time_generate(self, preset):
        generate(GraphSpec.preset(preset))

    def peakmem_generate(self, preset):
        generate(GraphSpec.preset(preset))


class Prepare:
    params = [[common.BASELINE] + [o.name for o in registry.REGISTRY.values() if o.layer == "gnnbench.graphs.prepare"]]
    param_names = ["optimization"]

    def setup(self, name):
        self.graph = common.graph(GraphSpec.preset("small"))
        self.flags = Flags() if name == common.BASELINE else registry.get(name).apply(Flags())

    def time_prepare(self, name):
        prepare(self.graph, self.flags)

    def time_neighbours(self, name):
        prepare(self.graph, self.flags).neighbours()

    def track_index_bytes(self, name):
        return prepare(self.graph, self.flags).index_bytes_after

    track_index_bytes.unit = "bytes"
