// The fuzz driver (tools/fuzz.sh; not a product). Built by tools/fuzz.sh with coverage instrumentation,
// AddressSanitizer and -DRELAYTRACE_FUZZ, `relaytrace-fuzz TARGET [libFuzzer options] [CORPUS...]` runs
// libFuzzer on TARGET. Built normally, `relaytrace-fuzz TARGET FILE...` runs each file through TARGET once
// (to reproduce a crash in a debugger without the instrumented build).
import FuzzTargets
import Foundation

let usage = "usage: relaytrace-fuzz TARGET [libFuzzer options] [CORPUS_DIR...]\ntargets:\n"
    + FuzzTargets.all.map { "  \($0.name.padding(toLength: 15, withPad: " ", startingAt: 0)) \($0.summary)" }.joined(separator: "\n")

let arguments = CommandLine.arguments
guard arguments.count >= 2, let target = FuzzTargets.named(arguments[1]) else {
    FileHandle.standardError.write(Data((usage + "\n").utf8))
    exit(64)
}

#if RELAYTRACE_FUZZ
/// The target libFuzzer's callback runs (set once before the driver starts, read only afterwards).
nonisolated(unsafe) var selected = target

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

// libFuzzer sees the program name and the options after TARGET.
var cArgs: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + arguments.dropFirst(2)).map { strdup($0) } + [nil]
var argc = Int32(cArgs.count - 1)
let status = cArgs.withUnsafeMutableBufferPointer { buffer -> Int32 in
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = buffer.baseAddress
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        selected.run(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
}
exit(status)
#else
var inputs = 0
for path in arguments.dropFirst(2) {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        FileHandle.standardError.write(Data("relaytrace-fuzz: no such file: \(path)\n".utf8))
        exit(66)
    }
    let files = isDirectory.boolValue
        ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 }
        : [path]
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { continue }
        target.run([UInt8](data))
        inputs += 1
    }
}
print("\(target.name): \(inputs) input(s) ran without a crash")
#endif
