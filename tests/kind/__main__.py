"""`python3 dev.py kind image|up|down|path`: the kind lane's node image and cluster.

image  build the node image (and everything in it) unless it is cached
       (--if-possible: say why not and succeed where the lane cannot run)
up     start the lane's dockerd, build what is missing, create the cluster
down   delete the cluster, restore what its node changed, stop that dockerd
path   print the folder holding the lane's `kind` (prepend it to PATH)
"""

from __future__ import annotations

import signal
import sys

from . import cluster, engine, gobuild, lane, nodeimage


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command == "image" and "--if-possible" in argv[1:]:
        reason = lane.unavailable_reason()
        if reason is not None:
            print(f"kind image: not built ({reason})", flush=True)
            return 0
    # SIGTERM (dev.py stopping a build that outlasted its budget) unwinds as an exit does,
    # so the engine this run started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if command == "image":
            started = engine.start()
            try:
                print(nodeimage.ensure_node_image(), flush=True)
            finally:
                if started:
                    engine.stop()
        elif command == "up":
            cluster.up(lambda line: print(line, flush=True))
        elif command == "down":
            cluster.down(lambda line: print(line, flush=True))
        elif command == "path":
            print(cluster.shim_dir())
        else:
            print(__doc__)
            return 2
    except (RuntimeError, gobuild.BuildError) as exc:
        print(f"kind {command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
