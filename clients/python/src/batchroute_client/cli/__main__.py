import sys

from batchroute_client.cli import main

sys.exit(main())
