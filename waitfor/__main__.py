from waitfor.cli import main

main()
