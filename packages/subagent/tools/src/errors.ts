import { DshError } from '@dsh/context'

export type ToolSubagentControlErrorCode =
  /** The model's tool input does not match the schema (wrong types, extra keys). */
  | 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT'
  /** `execute` was called without a calling agent session id. */
  | 'TOOL_SUBAGENT_CONTROL_INVALID_CONTEXT'

export class ToolSubagentControlError extends DshError<ToolSubagentControlErrorCode> {}
