// `import WatchReplay` brings the replay core's types (stops, conditions, divergences, records, faults)
// with it, as they are part of this module's API.
@_exported public import ReplayCore
