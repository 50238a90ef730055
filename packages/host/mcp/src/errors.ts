import { DshError } from '@dsh/context'

export type McpErrorCode =
  /** A tool's arguments do not match its input schema; the message names each bad field. */
  | 'MCP_INVALID_INPUT'
  /** The client called a tool this server does not offer (control tools need `allowControl`). */
  | 'MCP_UNKNOWN_TOOL'
  /** A service the tool needs is not in the host (e.g. search without a search index). */
  | 'MCP_SERVICE_UNAVAILABLE'
  /** A control tool named an acting session that is neither live nor loadable. */
  | 'MCP_AGENT_UNAVAILABLE'
  /** The acting session already has `maxChildren` subagents: no child was started. */
  | 'MCP_CHILD_LIMIT'
  /** `maxConcurrentRuns` child runs started over this server are still going: nothing was started. */
  | 'MCP_RUN_LIMIT'
  /** `maxConcurrentReads` read calls are being answered and `maxWaitingReads` wait their turn: nothing was read. */
  | 'MCP_BUSY'
  /** A server or transport option is out of range (a limit that is not a positive integer, a transport started twice). */
  | 'MCP_INVALID_OPTIONS'
  /** An untyped failure inside a tool: a bug to report. */
  | 'MCP_TOOL_FAILED'

/** The one error class of `@dsh/mcp`. Tool failures reach the client as `isError` results carrying `code`. */
export class McpError extends DshError<McpErrorCode> {}
