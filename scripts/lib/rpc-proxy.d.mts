export declare const DEFAULT_MAX_LOG_RANGE: number;
export declare const DEFAULT_MAX_BATCH: number;
export declare const RANGE_STYLES: readonly ["quicknode", "alchemy"];

export interface ProviderLimitOptions {
  maxLogRange?: number;
  maxBatch?: number;
  /** 0: no cap on the logs an answer holds. */
  maxLogResults?: number;
  style?: "quicknode" | "alchemy";
  /** false: refuse nothing, count what would have been refused in `overCaps`. */
  enforce?: boolean;
}

export interface RpcRefusal {
  kind: "logRange" | "batch" | "logResults";
  method?: string;
  blocks?: number;
  fromBlock?: string;
  toBlock?: string;
  size?: number;
  results?: number;
}

export interface RpcProxyStats {
  requests: number;
  calls: number;
  byMethod: Record<string, number>;
  batches: number;
  largestBatch: number;
  largestLogRange: number;
  largestLogRangeAsked: number;
  refused: { logRange: number; batch: number; logResults: number };
  overCaps: { logRange: number; batch: number };
  refusals: RpcRefusal[];
}

export interface Forwarded {
  status: number;
  text: string;
}

export interface ProviderLimits {
  handle(body: string, forward: (text: string) => Promise<Forwarded>): Promise<Forwarded>;
  stats(): RpcProxyStats;
  reset(): void;
  limits: Required<ProviderLimitOptions>;
}

export declare function providerLimits(options?: ProviderLimitOptions): ProviderLimits;
export declare function forwardTo(upstream: string): (text: string) => Promise<Forwarded>;
export declare function logSpan(
  filter: unknown,
  head: () => Promise<bigint>,
): Promise<{ from: bigint | null; to: bigint | null; blocks: bigint } | null>;

export interface RpcProxy {
  url: string;
  port: number;
  limits: Required<ProviderLimitOptions>;
  stats(): RpcProxyStats;
  reset(): void;
  close(): Promise<void>;
}

export declare function startRpcProxy(
  options: { upstream: string; host?: string; port?: number } & ProviderLimitOptions,
): Promise<RpcProxy>;
