import { streamEvent, type StreamEventBody } from '@dsh/apiproxy/schemas'
import { ClientError } from './errors.js'

/** Event names this client knows; others are skipped, so a newer host can add some. */
const KNOWN_EVENTS = new Set(['ready', 'projection', 'catalog'])

/**
 * Parses a `text/event-stream` body (the subset the host writes: `event`,
 * `data`, `id`, comments) into validated events. Stops quietly when `signal`
 * aborts or the server ends the stream.
 */
export async function* readEventStream(body: ReadableStream<Uint8Array>, signal: AbortSignal | undefined): AsyncGenerator<StreamEventBody> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  const onAbort = (): void => void reader.cancel().catch(() => {})
  signal?.addEventListener('abort', onAbort, { once: true })
  let buffer = ''
  let event = 'message'
  let data: string[] = []
  try {
    while (true) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch (error) {
        if (signal?.aborted) return
        throw new ClientError('CLIENT_NETWORK', 200, 'The event stream broke off.', { cause: error })
      }
      if (chunk.done) return
      buffer += decoder.decode(chunk.value, { stream: true })
      let newline: number
      while ((newline = buffer.search(/\r\n|\r|\n/)) !== -1) {
        const line = buffer.slice(0, newline)
        buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1))
        if (line === '') {
          if (data.length > 0 && KNOWN_EVENTS.has(event)) yield parseEvent(event, data.join('\n'))
          event = 'message'
          data = []
          continue
        }
        if (line.startsWith(':')) continue
        const colon = line.indexOf(':')
        const field = colon === -1 ? line : line.slice(0, colon)
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
        if (field === 'event') event = value
        else if (field === 'data') data.push(value)
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
    await reader.cancel().catch(() => {})
  }
}

function parseEvent(event: string, text: string): StreamEventBody {
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch (error) {
    throw new ClientError('CLIENT_INVALID_RESPONSE', 200, `The "${event}" stream event does not carry JSON.`, { cause: error })
  }
  const parsed = streamEvent.safeParse({ event, data })
  if (!parsed.success) {
    throw new ClientError('CLIENT_INVALID_RESPONSE', 200, `The "${event}" stream event does not match the API schema: ${parsed.error.issues[0]?.message ?? 'invalid'}.`, { cause: parsed.error })
  }
  return parsed.data
}
