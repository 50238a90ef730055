import { DshError } from '@dsh/context'

export type ToolSubagentControlErrorCode =
  /** The model's tool input does not match the schema (wrong types, extra keys). */
  | 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT'
  /** `execute` was called without a calling agent session id. */
  | 'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT'
  /** The program building the tools passed an unknown dialect, format or an empty provider name. */
  | 'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS'
  /** A subagent the caller waited for (harness `run_in_background: false`) did not complete; the message carries why and any partial answer. */
  | 'TOOL_SUBAGENT_CONTROL_SUBAGENT_FAILED'

export class ToolSubagentControlError extends DshError<ToolSubagentControlErrorCode> {}
