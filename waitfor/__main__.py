from waitfor.cli.signals import run

run()
