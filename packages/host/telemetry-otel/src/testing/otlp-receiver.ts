import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One span as an OTLP/HTTP JSON request carries it, with its attributes decoded. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly kind: number
  /** Epoch ms (from the nanosecond strings). */
  readonly start: number
  readonly end: number
  readonly attributes: Readonly<Record<string, unknown>>
  readonly status: { readonly code: number; readonly message?: string }
  readonly service: unknown
}

export interface OtlpReceiver {
  /** The traces URL to export to. */
  readonly url: string
  readonly spans: ReceivedSpan[]
  /** Export requests received. */
  requests: number
  close(): Promise<void>
}

interface AnyValue {
  stringValue?: string
  intValue?: number | string
  doubleValue?: number
  boolValue?: boolean
  arrayValue?: { values?: AnyValue[] }
}

function decode(value: AnyValue | undefined): unknown {
  if (value === undefined) return undefined
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(decode)
  return undefined
}

function attributesOf(list: { key: string; value?: AnyValue }[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, decode(value)]))
}

/**
 * A real OTLP/HTTP traces receiver speaking the JSON encoding (what the
 * OTLP/HTTP JSON exporter sends to `POST /v1/traces`): it decodes every
 * request into spans and answers 200 `{}` as a collector does.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const receiver = { spans, requests: 0 } as { spans: ReceivedSpan[]; requests: number }
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = []
    req.on('data', (part: Buffer) => parts.push(part))
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('application/json')) {
        res.writeHead(404).end()
        return
      }
      receiver.requests++
      const body = JSON.parse(Buffer.concat(parts).toString('utf8')) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value?: AnyValue }[] }
          scopeSpans?: { spans?: Record<string, unknown>[] }[]
        }[]
      }
      for (const resource of body.resourceSpans ?? []) {
        const service = attributesOf(resource.resource?.attributes)['service.name']
        for (const scope of resource.scopeSpans ?? []) {
          for (const span of scope.spans ?? []) {
            const parent = span.parentSpanId as string | undefined
            spans.push({
              traceId: span.traceId as string,
              spanId: span.spanId as string,
              parentSpanId: parent === undefined || parent === '' ? undefined : parent,
              name: span.name as string,
              kind: span.kind as number,
              start: Number(BigInt(span.startTimeUnixNano as string) / 1_000_000n),
              end: Number(BigInt(span.endTimeUnixNano as string) / 1_000_000n),
              attributes: attributesOf(span.attributes as { key: string; value?: AnyValue }[]),
              status: (span.status ?? { code: 0 }) as { code: number; message?: string },
              service,
            })
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${port}/v1/traces`,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    },
  })
}

/**
 * The spans as a tree of labels: `label` for a leaf, `[label, children]`
 * otherwise. Siblings are sorted by their rendering, not by time, so the
 * shape never depends on how fast the machine ran.
 */
export function spanTree(spans: readonly ReceivedSpan[], label: (span: ReceivedSpan) => string = (s) => s.name): unknown[] {
  const byParent = new Map<string | undefined, ReceivedSpan[]>()
  const ids = new Set(spans.map((span) => span.spanId))
  for (const span of spans) {
    const parent = span.parentSpanId !== undefined && ids.has(span.parentSpanId) ? span.parentSpanId : undefined
    byParent.set(parent, [...(byParent.get(parent) ?? []), span])
  }
  const build = (parent: string | undefined): unknown[] =>
    (byParent.get(parent) ?? [])
      .map((span) => {
        const children = build(span.spanId)
        return children.length === 0 ? label(span) : [label(span), children]
      })
      .sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1))
  return build(undefined)
}
