export * from "./merchants";
export * from "./agents";
export * from "./charges";
export * from "./approvals";
export * from "./ledger";
export * from "./events";
export * from "./console";
