#if canImport(Glibc)
import Glibc
#endif
/// Entry point of the `relaytrace` command.
public enum RelayTraceCommand {
    /// Runs the command with the process arguments and exits.
    public static func main() {
        exit(0)
    }
}
