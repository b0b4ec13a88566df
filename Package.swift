// swift-tools-version: 6.0
// RelayTrace: record-and-replay debugger for the PlanToCode relay client.
// Targets live in one folder per layer, Sources/LAYER/TARGET, and depend only down the layers (within a
// layer only where docs/ARCHITECTURE.md, "Layers", gives it an order or a foundation such as ReplayCore;
// PackageLayoutTests checks both):
//   System < Core < Transport < Recording < Analysis < Replaying < Drivers < Testing < Apps
import Foundation
import PackageDescription

/// How `relaytrace` is linked on Linux: Swift, Foundation, libstdc++ and the C libraries that Debian ships
/// as archives (OpenSSL, zstd, SQLite: tools/static-libs) statically, position-dependent (see the target
/// below), unless RELAYTRACE_DYNAMIC_LINK=1 asks for the toolchain's default, the baseline that
/// tools/bench-start.sh measures against. (The system libraries carry no pkg-config: its
/// `-L/usr/lib/x86_64-linux-gnu` would come before tools/static-libs and pick the shared ones.)
let staticBinary: [LinkerSetting] =
    ProcessInfo.processInfo.environment["RELAYTRACE_DYNAMIC_LINK"] == "1" ? [] :
    [.unsafeFlags(["-static-stdlib", "-Xclang-linker", "-no-pie", "-use-ld=lld",
                   "-L" + Context.packageDirectory + "/tools/static-libs"], .when(platforms: [.linux]))]
    + ["CoreFoundation", "_FoundationCollections", "_FoundationCShims", "_FoundationICU"].map { .linkedLibrary($0, .when(platforms: [.linux])) }

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "RelayTrace",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "relaytrace", targets: ["relaytrace"]),
        .library(name: "RelayProtocol", targets: ["RelayProtocol"]),
        .library(name: "RelayClient", targets: ["RelayClient"]),
        .library(name: "RelayTestSupport", targets: ["RelayTestSupport"]),
        .library(name: "Trace", targets: ["Trace"]),
        .library(name: "WebSocket", targets: ["WebSocket"]),
        .library(name: "DevRelay", targets: ["DevRelay"]),
        .library(name: "Capture", targets: ["Capture"]),
        .library(name: "ReplayCore", targets: ["ReplayCore"]),
        .library(name: "Replay", targets: ["Replay"]),
        .library(name: "Runtime", targets: ["Runtime"]),
        .library(name: "ReplayTesting", targets: ["ReplayTesting"]),
        .library(name: "Simulation", targets: ["Simulation"]),
        .library(name: "Inspect", targets: ["Inspect"]),
        .library(name: "WatchLink", targets: ["WatchLink"]),
        .library(name: "Net", targets: ["Net"]),
        .library(name: "WatchCapture", targets: ["WatchCapture"]),
        .library(name: "WatchNet", targets: ["WatchNet"]),
        .library(name: "WatchSimulation", targets: ["WatchSimulation"]),
        .library(name: "OfflineQueue", targets: ["OfflineQueue"]),
        .library(name: "WatchReplay", targets: ["WatchReplay"]),
        .library(name: "WireRecording", targets: ["WireRecording"]),
        .library(name: "Proxy", targets: ["Proxy"]),
        .library(name: "WireReplay", targets: ["WireReplay"]),
        .library(name: "LinkQR", targets: ["LinkQR"]),
        .library(name: "SpecCheck", targets: ["SpecCheck"]),
        .library(name: "Viewer", targets: ["Viewer"]),
    ],
    targets: [
        // C libraries from Debian -dev packages (installed by tools/setup.sh).
        .systemLibrary(name: "CZstd", path: "Sources/System/CZstd", providers: [.apt(["libzstd-dev"])]),
        .systemLibrary(name: "COpenSSL", path: "Sources/System/COpenSSL", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CSQLite", path: "Sources/System/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CQRencode", path: "Sources/System/CQRencode", providers: [.apt(["libqrencode-dev"])]),
        // epoll and eventfd (Linux, libc6-dev), which Swift's Glibc module does not export: the event loop.
        .systemLibrary(name: "CEpoll", path: "Sources/System/CEpoll", providers: [.apt(["libc6-dev"])]),

        // Wire model: JSON values, messages, RPC catalogue, traceparent, PTC1, seeded RNG.
        .target(name: "RelayProtocol", path: "Sources/Core/RelayProtocol", swiftSettings: strict),
        // The sans-IO relay client machine (SPEC Part A).
        .target(name: "RelayClient", dependencies: ["RelayProtocol"], path: "Sources/Core/RelayClient", swiftSettings: strict),
        // Test harness for the machine: virtual time, feed inputs, take actions, finish.
        .target(name: "RelayTestSupport", dependencies: ["RelayClient", "RelayProtocol"], path: "Sources/Testing/RelayTestSupport", swiftSettings: strict),
        // Trace file: records, chunked zstd writer/reader, index, redaction.
        // The project's one lock: Synchronization.Mutex, visible to ThreadSanitizer (tools/sanitize.sh).
        .target(name: "Sync", path: "Sources/Core/Sync", swiftSettings: strict),
        .target(name: "Trace", dependencies: ["Sync", "CZstd", "COpenSSL", "RelayProtocol"], path: "Sources/Core/Trace", swiftSettings: strict),
        // The development relay and a simulated desktop, sans-IO (PROTOCOL.md behaviour), with fault scripts.
        .target(name: "DevRelay", dependencies: ["RelayProtocol", "COpenSSL"], path: "Sources/Core/DevRelay", swiftSettings: strict),
        // The sans-IO watch <-> phone command and snapshot channels (SPEC Part C).
        .target(name: "WatchLink", dependencies: ["RelayProtocol"], path: "Sources/Core/WatchLink", swiftSettings: strict),
        // The watch channel's trace vocabulary: WatchLink inputs/actions as records on channel `watch`.
        .target(name: "WatchCapture", dependencies: ["WatchLink", "Trace", "RelayProtocol"], path: "Sources/Recording/WatchCapture", swiftSettings: strict),
        // The watch link's real transport: UDP datagrams on loopback (POSIX sockets).
        .target(name: "WatchNet", dependencies: ["WatchLink"], path: "Sources/Transport/WatchNet", swiftSettings: strict),
        // Watch + phone on virtual time over a seeded lossy datagram channel; `simulate --scenario watch-*`.
        .target(name: "WatchSimulation", dependencies: ["WatchCapture", "WatchLink", "Trace", "RelayProtocol"], path: "Sources/Drivers/WatchSimulation", swiftSettings: strict),
        // The phone's offline action queue and caches in SQLite (SPEC Part B), schema migrations.
        .target(name: "OfflineQueue", dependencies: ["CSQLite"], path: "Sources/Core/OfflineQueue", swiftSettings: strict),
        // QR symbols of link codes (libqrencode) for the terminal (half blocks) and as PNG (written here).
        .target(name: "LinkQR", dependencies: ["CQRencode"], path: "Sources/Core/LinkQR", swiftSettings: strict),
        // RFC 6455 codec (sans-IO).
        .target(name: "WebSocket", dependencies: ["COpenSSL"], path: "Sources/Transport/WebSocket", swiftSettings: strict),
        // Wire traces for any client: the recorder the recording relay, the proxy and in-app clients call
        // from their WebSocket callbacks (no Linux-only API: it must build for Apple platforms too).
        .target(name: "WireRecording", dependencies: ["Trace", "RelayProtocol"], path: "Sources/Recording/WireRecording", swiftSettings: strict),
        // Replaying a recorded session's relay side to live clients (`relaytrace relay --replay`), sans-IO:
        // client frames matched to the recording by meaning, the relay's frames served at their offsets.
        .target(name: "WireReplay", dependencies: ["Trace", "RelayProtocol"], path: "Sources/Recording/WireReplay", swiftSettings: strict),
        // The recording WebSocket proxy between an unmodified client and any relay (`relaytrace proxy`).
        .target(name: "Proxy", dependencies: ["Net", "WebSocket", "WireRecording", "Trace", "RelayProtocol"], path: "Sources/Drivers/Proxy", swiftSettings: strict),
        // The capture layer: the client's inputs and actions as trace records, the recorder, the capturing transport.
        .target(name: "Capture", dependencies: ["RelayClient", "Trace", "RelayProtocol"], path: "Sources/Recording/Capture", swiftSettings: strict),
        // Client + relay + desktop in one process on virtual time; the scenarios of `relaytrace simulate`.
        .target(name: "Simulation", dependencies: ["Capture", "DevRelay", "RelayClient", "Trace", "RelayProtocol", "OfflineQueue"], path: "Sources/Drivers/Simulation", swiftSettings: strict),
        // Trace analyses for the inspection commands: filters, RPC correlation, stats, timeline, diff,
        // exporters (pcapng, HAR, chrome trace), secrets lint.
        .target(name: "Inspect", dependencies: ["Sync", "Trace", "RelayProtocol"], path: "Sources/Analysis/Inspect", swiftSettings: strict),
        // `relaytrace check`: the SPEC's rules that can be seen on the wire, judged on any trace (machine or
        // wire); stated from the SPEC, never from the client machine (no dependency on RelayClient).
        .target(name: "SpecCheck", dependencies: ["Inspect", "Trace", "RelayProtocol"], path: "Sources/Analysis/SpecCheck", swiftSettings: strict),
        // What every replayer shares: stops, conditions and the pause logic, divergence reports, the records
        // (in memory or a chunk at a time from the file), faults and ddmin shrinking, the stepping protocol.
        .target(name: "ReplayCore", dependencies: ["Trace", "RelayProtocol"], path: "Sources/Replaying/ReplayCore", swiftSettings: strict),
        // Strict replay of relay-client traces, stepping, checkpoints, what-if and perturbation replay.
        .target(name: "Replay", dependencies: ["ReplayCore", "Capture", "RelayClient", "Trace", "RelayProtocol", "WireReplay", "SpecCheck"], path: "Sources/Replaying/Replay", swiftSettings: strict),
        // The live drivers: the client machine on the real clock over real WebSockets (with capture), and the
        // development relay + simulated desktop behind a real server socket.
        .target(name: "Runtime", dependencies: ["Sync", "Net", "WebSocket", "WireRecording", "WireReplay", "Capture", "DevRelay", "RelayClient", "Trace", "RelayProtocol", "COpenSSL", "OfflineQueue"], path: "Sources/Drivers/Runtime", swiftSettings: strict),
        // Strict replay of watch-channel traces, and perturbation replay: seeded faults, invariants, shrinking.
        .target(name: "WatchReplay", dependencies: ["ReplayCore", "WatchCapture", "WatchLink", "Trace", "RelayProtocol"], path: "Sources/Replaying/WatchReplay", swiftSettings: strict),
        // Swift Testing helpers for replaying traces in users' test targets.
        .target(name: "ReplayTesting", dependencies: ["Replay", "WatchReplay", "RelayClient", "WireReplay", "Runtime", "Trace"], path: "Sources/Testing/ReplayTesting", swiftSettings: strict),
        // POSIX TCP, OpenSSL TLS, epoll event loops with a WebSocket server and client connections on them,
        // and the blocking WebSocket client, all over the sans-IO codec.
        .target(name: "Net", dependencies: ["Sync", "WebSocket", "COpenSSL", "CEpoll"], path: "Sources/Transport/Net", swiftSettings: strict),
        // The trace viewer (`relaytrace view`, `timeline --html`): the page (HTML, CSS, JavaScript compiled
        // in), its JSON API over the trace's index, and a small loopback HTTP/1.1 server.
        .target(name: "Viewer", dependencies: ["Sync", "Inspect", "Trace", "RelayProtocol", "Net"], path: "Sources/Apps/Viewer", swiftSettings: strict),
        // The command-line interface; `relaytrace` is a two-line main.
        .target(name: "RelayTraceCLI", dependencies: ["Sync", "Viewer", "LinkQR", "Trace", "RelayProtocol", "RelayClient", "Capture", "Simulation", "DevRelay", "Inspect", "Replay", "Runtime", "Net", "WatchSimulation", "WatchReplay", "WireRecording", "Proxy", "WireReplay", "SpecCheck"], path: "Sources/Apps/RelayTraceCLI", swiftSettings: strict),
        .executableTarget(
            name: "relaytrace", dependencies: ["RelayTraceCLI"], path: "Sources/Apps/relaytrace", swiftSettings: strict,
            // Linux: the Swift runtime and Foundation linked in statically (with the libraries the shared
            // Foundation would have pulled in itself) into a position-dependent executable, so a process
            // starts in ~4 ms instead of ~15 ms: no loading of libFoundation and its ICU, no 80,000 relative
            // relocations. That is most of a seek (`show N`) and of every test that runs the binary
            // (docs/BENCHMARKS.md, "Process start"; docs/ARCHITECTURE.md says why no PIE).
            linkerSettings: staticBinary),
        // The trace benchmark driver (tools/bench-trace.sh); not a product.
        .executableTarget(name: "relaytrace-bench", dependencies: ["Trace", "RelayProtocol"], path: "Sources/Apps/relaytrace-bench", swiftSettings: strict),
        // The proxy and in-app recorder benchmarks (tools/bench-proxy.sh, tools/bench-recorder.sh); not a product.
        .executableTarget(name: "relaytrace-wirebench", dependencies: ["Net", "Proxy", "WireRecording", "Trace", "WebSocket", "RelayProtocol"], path: "Sources/Apps/relaytrace-wirebench", swiftSettings: strict),
        // A child process for the trace crash test (SIGKILL while writing); not a product.
        .executableTarget(name: "relaytrace-test-fixture", dependencies: ["Trace", "RelayProtocol"], path: "Sources/Apps/relaytrace-test-fixture", swiftSettings: strict),
        // A child process for the offline-queue crash test (SIGKILL mid-write); not a product.
        .executableTarget(name: "offlinequeue-test-fixture", dependencies: ["OfflineQueue"], path: "Sources/Apps/offlinequeue-test-fixture", swiftSettings: strict),
        // The coverage-guided fuzz targets (bytes -> parsers, with invariants) and their driver
        // (tools/fuzz.sh builds it with libFuzzer and AddressSanitizer); not products.
        .target(name: "FuzzTargets", dependencies: ["Trace", "WebSocket", "RelayProtocol", "DevRelay", "WatchLink", "RelayTraceCLI"], path: "Sources/Apps/FuzzTargets", swiftSettings: strict),
        .executableTarget(name: "relaytrace-fuzz", dependencies: ["FuzzTargets"], path: "Sources/Apps/relaytrace-fuzz", swiftSettings: strict),

        .testTarget(name: "RelayProtocolTests", dependencies: ["RelayProtocol"], exclude: ["Fixtures"], swiftSettings: strict),
        .testTarget(name: "RelayClientTests", dependencies: ["RelayClient", "RelayTestSupport", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "TraceTests", dependencies: ["Sync", "Trace", "CZstd", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "RelayTraceCLITests", dependencies: ["Sync", "RelayTraceCLI", "Trace", "RelayProtocol", "Inspect"], swiftSettings: strict),
        .testTarget(name: "InspectTests", dependencies: ["Inspect", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "ViewerTests", dependencies: ["Viewer", "Inspect", "Trace", "RelayProtocol", "Net"], swiftSettings: strict),
        .testTarget(name: "RuntimeTests", dependencies: ["Sync", "Runtime", "Net", "Capture", "Replay", "Simulation", "DevRelay", "RelayClient", "Trace", "RelayProtocol", "Proxy", "WireRecording"], swiftSettings: strict),
        .testTarget(name: "ReplayTests", dependencies: ["Sync", "Replay", "ReplayTesting", "Simulation", "Capture", "RelayClient", "Trace", "RelayProtocol", "Net", "WebSocket", "Runtime", "WireRecording", "WireReplay"], swiftSettings: strict),
        .testTarget(name: "CaptureTests", dependencies: ["Capture", "RelayClient", "RelayTestSupport", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "SimulationTests", dependencies: ["Simulation", "Capture", "RelayClient", "Trace", "RelayProtocol", "DevRelay", "OfflineQueue", "Replay"], swiftSettings: strict),
        .testTarget(name: "DevRelayTests", dependencies: ["DevRelay", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "WebSocketTests", dependencies: ["WebSocket"], swiftSettings: strict),
        .testTarget(name: "WatchLinkTests", dependencies: ["WatchLink", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "NetTests", dependencies: ["Sync", "Net", "WebSocket"], swiftSettings: strict),
        .testTarget(name: "WatchCaptureTests", dependencies: ["WatchCapture", "WatchLink", "WatchNet", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "WatchSimulationTests", dependencies: ["WatchSimulation", "WatchCapture", "WatchLink", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "WatchReplayTests", dependencies: ["WatchReplay", "Replay", "ReplayTesting", "WatchSimulation", "WatchCapture", "WatchLink", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "WireRecordingTests", dependencies: ["Sync", "WireRecording", "Proxy", "Net", "WebSocket", "Runtime", "Simulation", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "WireReplayTests", dependencies: ["Sync", "WireReplay", "WireRecording", "Trace", "RelayProtocol"], swiftSettings: strict),
        .testTarget(name: "LinkQRTests", dependencies: ["LinkQR"], swiftSettings: strict),
        .testTarget(name: "OfflineQueueTests", dependencies: ["OfflineQueue", "CSQLite"], swiftSettings: strict),
        .testTarget(name: "FuzzTargetsTests", dependencies: ["FuzzTargets"], swiftSettings: strict),
        .testTarget(name: "SpecCheckTests", dependencies: ["SpecCheck", "Inspect", "Simulation", "WatchSimulation", "Trace", "RelayProtocol"], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
