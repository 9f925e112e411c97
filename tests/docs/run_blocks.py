"""Run one page's code blocks in order: ``python run_blocks.py BLOCKS_JSON``.

Runs in the page's sandbox directory (the working directory). Python blocks share one
namespace; bash blocks run with ``set -euo pipefail``. Stops at the first failing block,
naming it on stderr, with exit status 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
import traceback


def main(path: str) -> int:
    with open(path) as f:
        blocks = json.load(f)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in blocks:
        where = block["where"]
        print(f"--- running {where} ({block['lang']})", flush=True)
        if block["lang"] == "python":
            try:
                exec(compile(block["code"], where, "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED: the python block at {where}", file=sys.stderr, flush=True)
                return 1
        else:
            code = subprocess.run(["bash", "-c", "set -euo pipefail\n" + block["code"]]).returncode
            if code != 0:
                print(
                    f"FAILED: the bash block at {where} exited {code}", file=sys.stderr, flush=True
                )
                return 1
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
