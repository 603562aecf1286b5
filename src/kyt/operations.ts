import { INVALID, json, type Operation } from "../lib/api-operation";
import { body } from "../lib/api-shapes";
import { BlocklistAdded, BlocklistList, KytResult } from "./responses";
import { BlocklistBody, ScreenBody } from "./routes";

/** KYT: screening and the operators' blocklist. */
export const KYT_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/kyt/screen",
    operationId: "screenAddress",
    summary: "Screen an address",
    tag: "KYT",
    auth: "console",
    body: body("ScreenRequest", ScreenBody),
    responses: { 200: json(KytResult, "The verdict."), 400: INVALID },
  },
  {
    method: "get",
    path: "/console/kyt/blocklist",
    operationId: "listBlocklist",
    summary: "The operators' KYT blocklist",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(BlocklistList, "Entries, newest first.") },
  },
  {
    method: "post",
    path: "/console/kyt/blocklist",
    operationId: "addToBlocklist",
    summary: "Block an address",
    tag: "Operator extras",
    auth: "console",
    body: body("BlocklistRequest", BlocklistBody),
    responses: { 201: json(BlocklistAdded, "Added (or its reason updated)."), 400: INVALID },
  },
];
