import { textWithin } from '@dsh/context'
import { SessionTelemetryError } from './errors.js'

/** The path an OTLP/HTTP collector serves traces on. */
export const OTLP_TRACES_PATH = '/v1/traces'

/**
 * An OTLP/HTTP traces endpoint from what a person typed: an `http:` or
 * `https:` URL; a bare origin (`http://collector:4318`) gets the standard
 * `/v1/traces` path, any other path is used as given. Anything else fails
 * with `SESSION_TELEMETRY_INVALID_ENDPOINT`.
 */
export function parseOtlpEndpoint(input: string): string {
  let url: URL
  try {
    url = new URL(input)
  } catch (error) {
    throw invalid(input, 'it is not a URL', error)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalid(input, `its scheme is ${url.protocol} (OTLP/HTTP needs http: or https:)`)
  if (url.username !== '' || url.password !== '') {
    url.username = ''
    url.password = ''
    throw invalid(url.toString(), 'it carries credentials (send them as headers instead)')
  }
  if (url.pathname === '/' || url.pathname === '') url.pathname = OTLP_TRACES_PATH
  return url.toString()
}

function invalid(input: string, why: string, cause?: unknown): SessionTelemetryError {
  const shown = textWithin(input, 200)
  return new SessionTelemetryError(
    'SESSION_TELEMETRY_INVALID_ENDPOINT',
    `The OTLP endpoint ${JSON.stringify(shown)} cannot be used: ${why}. Give the collector's traces URL, e.g. http://127.0.0.1:4318/v1/traces.`,
    cause === undefined ? undefined : { cause },
  )
}
