from waitfor.cli.entry import run

run()
