from gpuhost.cli.app import console

console()
