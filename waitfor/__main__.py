from waitfor.entry import run

run()
