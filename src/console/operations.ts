import { error, INVALID, json, type Operation, RATE_LIMITED } from "../lib/api-operation";
import { body } from "../lib/api-shapes";
import { StartBody, UserBody, VerifyBody } from "./auth-routes";
import { ConsoleSession, ConsoleUserAdded, ConsoleUserList, EmailCodeSent, SignedOut } from "./responses";

/** Console sign-in (e-mail code, Cloudflare Access), sign-out and console users. */
export const CONSOLE_API_OPERATIONS: Operation[] = [
  {
    method: "post",
    path: "/console/auth/email/start",
    operationId: "startEmailSignIn",
    summary: "E-mail me a sign-in code",
    description: "Always 202: it never reveals whether the address may sign in. The code is valid 10 minutes, 5 tries.",
    tag: "Console sign-in",
    auth: "public",
    body: body("EmailSignInStartRequest", StartBody),
    responses: {
      202: json(EmailCodeSent, "Sent (if the address may sign in)."),
      400: INVALID,
      429: { ...RATE_LIMITED, generic: false },
    },
  },
  {
    method: "post",
    path: "/console/auth/email/verify",
    operationId: "verifyEmailSignIn",
    summary: "Exchange the code for a session token",
    tag: "Console sign-in",
    auth: "public",
    body: body("EmailSignInVerifyRequest", VerifyBody),
    responses: {
      200: json(ConsoleSession, "The session token."),
      400: INVALID,
      401: error("`invalid_code`.", "invalid_code"),
    },
  },
  {
    method: "post",
    path: "/console/auth/access",
    operationId: "accessSignIn",
    summary: "Sign in with Cloudflare Access",
    tag: "Console sign-in",
    auth: "public",
    headers: [
      {
        name: "Cf-Access-Jwt-Assertion",
        description: "The Access assertion, verified against the team's key set.",
        required: true,
      },
    ],
    responses: {
      200: json(ConsoleSession, "The session token."),
      401: error(
        "`access_assertion_required` or `access_assertion_invalid`.",
        "access_assertion_required",
        "access_assertion_invalid",
      ),
      403: error("`not_a_console_user`.", "not_a_console_user"),
      404: error("Access is not configured (`access_sign_in_not_configured`).", "access_sign_in_not_configured"),
    },
  },
  {
    method: "post",
    path: "/console/auth/sign-out",
    operationId: "signOut",
    summary: "End this console session",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(SignedOut, "The token no longer works.") },
  },
  {
    method: "get",
    path: "/console/users",
    operationId: "listConsoleUsers",
    summary: "Who may sign in",
    tag: "Operator extras",
    auth: "console",
    responses: { 200: json(ConsoleUserList, "Configured and added users.") },
  },
  {
    method: "post",
    path: "/console/users",
    operationId: "addConsoleUser",
    summary: "Allow an e-mail address to sign in",
    tag: "Operator extras",
    auth: "console",
    body: body("AddConsoleUserRequest", UserBody),
    responses: { 201: json(ConsoleUserAdded, "Added."), 400: INVALID },
  },
];
