import FerryCLI

FerryCommand.main()
