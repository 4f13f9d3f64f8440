"""``python -m gnnbench.runner_main CONFIG.json OUT.json``: run one configuration in this process
(used by sweeps to isolate each configuration)."""

import json
import sys

from gnnbench.runner import RunConfig, run


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m gnnbench.runner_main CONFIG.json OUT.json", file=sys.stderr)
        return 2
    config = RunConfig.from_dict(json.loads(open(argv[0]).read()))
    run(config, out=argv[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
