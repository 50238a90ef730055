import { ClientError } from './errors.js'

/** What a `Content-Type` value says, read the way HTTP defines it. */
export interface ContentType {
  /** `type/subtype` lower-cased, without parameters or surrounding whitespace; `''` when the header is absent. */
  readonly mediaType: string
  /** The `charset` parameter as sent (unquoted, case kept for messages), when there is one. */
  readonly charset: string | undefined
}

// A parameter after `;`: a name (case-insensitive) and a token or quoted-string value. Whitespace
// around `=` is not HTTP's grammar but is tolerated, as a lenient reader of a proxy's header.
const PARAMETER = /;[\t ]*([^\t ;="]+)[\t ]*=[\t ]*(?:"((?:[^"\\]|\\.)*)"|([^;]*))/g

/**
 * Reads a `Content-Type` header value. Media type names and parameter names
 * are case-insensitive (`Application/JSON; Charset=UTF-8` is JSON), so the
 * media type is compared lower-cased, and only after the parameters and the
 * optional whitespace before `;` are cut off.
 */
export function parseContentType(value: string | null): ContentType {
  if (value === null) return { mediaType: '', charset: undefined }
  const end = value.indexOf(';')
  const mediaType = (end === -1 ? value : value.slice(0, end)).replace(/^[\t ]+|[\t ]+$/g, '').toLowerCase()
  let charset: string | undefined
  if (end !== -1) {
    for (const [, name = '', quoted, token = ''] of value.slice(end).matchAll(PARAMETER)) {
      if (name.toLowerCase() !== 'charset') continue
      charset = quoted === undefined ? token.replace(/[\t ]+$/, '') : quoted.replace(/\\(.)/g, '$1')
      break
    }
  }
  return { mediaType, charset }
}

/** How a header value is shown in a message: quoted and cut short, since a hostile host chose it. */
export function shown(value: string): string {
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value)
}

/**
 * The error for an answer whose bytes are not UTF-8. JSON (RFC 8259) and
 * event streams are UTF-8 whatever a `charset` label says, and the dsh host
 * writes nothing else, so such bytes were re-encoded or damaged on the way.
 */
export function notUtf8(what: string, status: number, charset: string | undefined, cause: unknown): ClientError {
  const label = charset === undefined ? 'it declares no charset' : `it declares charset ${shown(charset)}`
  return new ClientError(
    'CLIENT_INVALID_RESPONSE',
    status,
    `${what} is not valid UTF-8 (${label}). The dsh host sends UTF-8 only, so something between the client and the host re-encoded or damaged it; check any proxy on the way.`,
    { cause },
  )
}

/**
 * The body of an answer as text, holding at most `maxBytes` bytes of it: an
 * answer that declares more in `Content-Length`, or sends more, is refused
 * with `CLIENT_RESPONSE_TOO_LARGE` and the rest is not read (the connection is
 * dropped), so a host that answers without end costs bounded memory. The
 * bytes are decoded as UTF-8 whatever `charset` the answer names; with
 * `strict`, bytes that are not UTF-8 fail with `CLIENT_INVALID_RESPONSE`
 * instead of turning into U+FFFD (an error page is read with `strict` off, so
 * its status and any typed code survive a re-encoding proxy). Errors of the
 * read itself (a reset, an abort) are thrown as they come, for the caller to type.
 */
export async function readBoundedText(response: Response, maxBytes: number, where: string, strict: boolean): Promise<string> {
  if (declaredLength(response) > maxBytes) {
    await response.body?.cancel().catch(() => {})
    throw tooLarge(response.status, maxBytes, where)
  }
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const decoder = new TextDecoder('utf-8', { fatal: strict })
  const decode = (bytes?: Uint8Array): string => {
    try {
      return bytes === undefined ? decoder.decode() : decoder.decode(bytes, { stream: true })
    } catch (error) {
      const { charset } = parseContentType(response.headers.get('content-type'))
      throw notUtf8(`The answer from ${where} (HTTP ${response.status})`, response.status, charset, error)
    }
  }
  let text = ''
  let bytes = 0
  try {
    while (true) {
      const chunk = await reader.read()
      if (chunk.done) return text + decode()
      bytes += chunk.value.byteLength
      if (bytes > maxBytes) throw tooLarge(response.status, maxBytes, where)
      text += decode(chunk.value)
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

/**
 * The body's length as `Content-Length` declares it, when that is the length
 * read here: with a `Content-Encoding` (gzip, br, deflate) fetch hands over
 * the decoded bytes, and the header counts the encoded ones, so it says
 * nothing about what `maxBytes` bounds (NaN: unknown, the read counts).
 */
function declaredLength(response: Response): number {
  const encoding = response.headers.get('content-encoding')
  if (encoding !== null && encoding.trim().toLowerCase() !== 'identity') return Number.NaN
  return Number(response.headers.get('content-length') ?? Number.NaN)
}

function tooLarge(status: number, maxBytes: number, where: string): ClientError {
  return new ClientError(
    'CLIENT_RESPONSE_TOO_LARGE',
    status,
    `The answer from ${where} (HTTP ${status}) is larger than ${maxBytes} bytes; it was not read further. Raise maxResponseBytes if the host really sends such answers.`,
  )
}
