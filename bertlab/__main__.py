from bertlab.cli import main

raise SystemExit(main())
