from allot_cli.main import main

main()
