from inferwatch.cli import main

main()
