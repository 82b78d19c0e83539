from epdoctor.cli import main

raise SystemExit(main())
