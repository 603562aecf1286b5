export type Role = "service" | "proxy" | "anvil";
export interface WatchedProcess {
  role: Role;
  pid: number;
  allThreads: boolean;
}
export interface Snapshot {
  atNs: bigint;
  readings: (WatchedProcess & {
    threads: Record<string, { cpuNs: number; waitNs: number; startTicks: string }> | null;
  })[];
}
export type Usage = Partial<Record<Role, { busy: number; waiting: number }>>;
export declare function serviceProcesses(pgid: number, port: number): WatchedProcess[];
export declare function snapshot(processes: WatchedProcess[]): Snapshot;
export declare function usage(before: Snapshot, after: Snapshot): Usage | null;
export declare function threadMeter(
  pgid: number,
  port: number,
): { begin: () => Snapshot; end: (begun: Snapshot) => Usage | null; cpuMs: (begun: Snapshot) => number | null };
export declare function describeUsage(shares: Usage | null): string | null;
