import { isDshError } from '@dsh/context'
import { CliError } from './errors.js'

/**
 * `--otlp URL` checked by the telemetry package's `parseOtlpEndpoint` (a
 * bare origin gets `/v1/traces`). A malformed URL is `CLI_USAGE`. Commands
 * load the telemetry package themselves, and only when the option is given.
 */
export function otlpEndpoint(value: string, parse: (input: string) => string): string {
  try {
    return parse(value)
  } catch (error) {
    if (isDshError(error, 'SESSION_TELEMETRY_INVALID_ENDPOINT'))
      throw new CliError('CLI_USAGE', `--otlp: ${error.message}`, { cause: error })
    throw error
  }
}
