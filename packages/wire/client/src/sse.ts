import { STREAM_EVENT_NAMES, type StreamEventBody, streamEvent } from '@dsh/protocol'
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { notUtf8 } from './body.js'
import { ClientError } from './errors.js'

const KNOWN_EVENTS: ReadonlySet<string> = new Set(STREAM_EVENT_NAMES)

/**
 * Reads a `text/event-stream` body into validated events with
 * `eventsource-parser` (linear in the input; `\r\n` split across chunks is one
 * line ending). At most `maxEventSize` characters of one unfinished message
 * are held: past that the stream fails with `CLIENT_STREAM_TOO_LARGE`, so a
 * host that never ends a line costs bounded memory. Unknown event names are
 * skipped (a newer host may add some). The bytes are UTF-8 whatever `charset`
 * the answer names (`charset`, kept for the message): a chunk that is not
 * fails the stream with `CLIENT_INVALID_RESPONSE` after the events of the
 * chunks before it, instead of turning into U+FFFD. Stops quietly when
 * `signal` aborts or the server ends the stream.
 */
export async function* readEventStream(
  body: ReadableStream<Uint8Array>,
  signal: AbortSignal | undefined,
  maxEventSize: number,
  charset: string | undefined,
): AsyncGenerator<StreamEventBody> {
  const reader = body.getReader()
  const decoder = new TextDecoder('utf-8', { fatal: true })
  const ready: StreamEventBody[] = []
  let failure: ClientError | undefined
  const parser = createParser({
    maxBufferSize: maxEventSize,
    onEvent(message) {
      if (failure === undefined && KNOWN_EVENTS.has(message.event ?? 'message')) {
        try {
          ready.push(parseEvent(message))
        } catch (error) {
          failure = error as ClientError
        }
      }
    },
    onError(error) {
      if (error.type === 'max-buffer-size-exceeded') {
        failure ??= new ClientError(
          'CLIENT_STREAM_TOO_LARGE',
          200,
          `An event-stream message grew past ${maxEventSize} characters without ending; the stream was closed. Raise maxEventSize if the host really sends such events.`,
        )
      }
      // Unknown fields and malformed retry values are ignored, as EventSource does.
    },
  })
  const onAbort = (): void => void reader.cancel().catch(() => {})
  signal?.addEventListener('abort', onAbort, { once: true })
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
      let text: string
      try {
        text = decoder.decode(chunk.value, { stream: true })
      } catch (error) {
        throw notUtf8('The event stream', 200, charset, error)
      }
      parser.feed(text)
      // The events that came before a failure in the same chunk are delivered first.
      while (ready.length > 0) yield ready.shift()!
      if (failure !== undefined) throw failure
      if (signal?.aborted) return
    }
  } finally {
    signal?.removeEventListener('abort', onAbort)
    await reader.cancel().catch(() => {})
  }
}

function parseEvent(message: EventSourceMessage): StreamEventBody {
  const event = message.event ?? 'message'
  let data: unknown
  try {
    data = JSON.parse(message.data)
  } catch (error) {
    throw new ClientError('CLIENT_INVALID_RESPONSE', 200, `The "${event}" stream event does not carry JSON.`, { cause: error })
  }
  const parsed = streamEvent.safeParse({ event, data })
  if (!parsed.success) {
    throw new ClientError(
      'CLIENT_INVALID_RESPONSE',
      200,
      `The "${event}" stream event does not match the API schema: ${parsed.error.issues[0]?.message ?? 'invalid'}.`,
      {
        cause: parsed.error,
      },
    )
  }
  return parsed.data
}
