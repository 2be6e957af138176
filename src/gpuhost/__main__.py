from gpuhost.cli.app import main

main()
