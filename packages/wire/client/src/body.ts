import { ClientError } from './errors.js'

/**
 * The body of an answer as text (UTF-8, as `Response.text()` decodes it),
 * holding at most `maxBytes` bytes of it: an answer that declares more in
 * `Content-Length`, or sends more, is refused with `CLIENT_RESPONSE_TOO_LARGE`
 * and the rest is not read (the connection is dropped), so a host that
 * answers without end costs bounded memory. Errors of the read itself (a
 * reset, an abort) are thrown as they come, for the caller to type.
 */
export async function readBoundedText(response: Response, maxBytes: number, where: string): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN)
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => {})
    throw tooLarge(response.status, maxBytes, where)
  }
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const decoder = new TextDecoder()
  let text = ''
  let bytes = 0
  try {
    while (true) {
      const chunk = await reader.read()
      if (chunk.done) return text + decoder.decode()
      bytes += chunk.value.byteLength
      if (bytes > maxBytes) throw tooLarge(response.status, maxBytes, where)
      text += decoder.decode(chunk.value, { stream: true })
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}

function tooLarge(status: number, maxBytes: number, where: string): ClientError {
  return new ClientError(
    'CLIENT_RESPONSE_TOO_LARGE',
    status,
    `The answer from ${where} (HTTP ${status}) is larger than ${maxBytes} bytes; it was not read further. Raise maxResponseBytes if the host really sends such answers.`,
  )
}
