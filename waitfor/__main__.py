from waitfor.cli import run

run()
