from nnsym.cli import main

raise SystemExit(main())
