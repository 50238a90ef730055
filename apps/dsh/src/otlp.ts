import { isDshError } from '@dsh/context'
import type { ParsedCommand } from './command.js'
import { CliError } from './errors.js'

/**
 * `--otlp URL`: the OTLP/HTTP traces endpoint, checked (a bare origin gets
 * `/v1/traces`); `undefined` when not given. A malformed URL is `CLI_USAGE`.
 * The telemetry package loads only when the option is given.
 */
export async function otlpEndpointOf(command: ParsedCommand): Promise<string | undefined> {
  const value = command.string('otlp')
  if (value === undefined) return undefined
  const { parseOtlpEndpoint } = await import('@dsh/session-telemetry-otel')
  try {
    return parseOtlpEndpoint(value)
  } catch (error) {
    if (isDshError(error, 'SESSION_TELEMETRY_INVALID_ENDPOINT'))
      throw new CliError('CLI_USAGE', `--otlp: ${error.message}`, { cause: error })
    throw error
  }
}
