"""Launch the inference server."""

import sys
import warnings

from ._lab import argtable, server, startup

if __name__ == "__main__":
    if startup.VERSION >= (0, 5, 12):
        warnings.warn(
            "'python -m sglang.launch_server' is still supported, but "
            "'sglang serve' is the recommended entrypoint.\n"
            "  Example: sglang serve --model-path <model> [options]",
            UserWarning,
            stacklevel=1,
        )
    server_args = argtable.parse(sys.argv[1:])
    sys.exit(server.serve(server_args, sys.argv[1:]))
