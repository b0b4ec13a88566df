import RelayTraceCLI
RelayTraceCommand.main()
