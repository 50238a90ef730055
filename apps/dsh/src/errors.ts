import { DshError } from '@dsh/context'

export type CliErrorCode =
  | 'CLI_USAGE'
  | 'CLI_UNKNOWN_COMMAND'
  | 'CLI_ROOT_INVALID'
  | 'CLI_VERIFY_FAILED'

export class CliError extends DshError<CliErrorCode> {}
