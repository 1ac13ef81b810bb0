import FerryCLI

/// The `ferry` executable: everything lives in `FerryCLI`.
@main
struct Ferry {
    static func main() async {
        await FerryCommand.main()
    }
}
