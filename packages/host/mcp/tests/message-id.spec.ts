import { describe, expect, it } from 'vitest'
import { MessageIdScanner } from '../src/message-id.js'

function scan(text: string, split: number[] = []): string | number | undefined {
  const bytes = Buffer.from(text)
  const scanner = new MessageIdScanner()
  let from = 0
  for (const at of [...split, bytes.length]) {
    scanner.feed(bytes.subarray(from, at))
    from = at
  }
  return scanner.id
}

/** Every way of cutting `text` in two, and byte by byte: the id must not depend on where pieces end. */
function everySplit(text: string): (string | number | undefined)[] {
  const length = Buffer.byteLength(text)
  const results = Array.from({ length: length + 1 }, (_, at) => scan(text, [at]))
  results.push(
    scan(
      text,
      Array.from({ length }, (_, at) => at),
    ),
  )
  return results
}

describe('MessageIdScanner', () => {
  it('finds the top-level id wherever it sits, however the message is cut', () => {
    const cases: [string, string | number][] = [
      ['{"jsonrpc":"2.0","id":7,"method":"tools/call"}', 7],
      // The SDK client writes the id last, after params that may hold ids of their own.
      ['{"method":"tools/call","params":{"name":"show_session","arguments":{"id":"s-1"}},"jsonrpc":"2.0","id":42}', 42],
      ['{ "params" : { "id" : 1, "list": [ {"id": 2}, "id" ] } , "id" : "req \\"9\\" é" }', 'req "9" é'],
      ['{"a":"id","b":["id",{"id":3}],"id":-12}', -12],
      ['{"idx":1,"i":2,"id":0}', 0],
      // Escaped backslashes and quotes inside long strings, where the scan jumps from one to the next.
      [`{"p":{"t":"${'x'.repeat(300)}\\\\\\"y\\\\","u":"\\"id\\":9"},"id":5}`, 5],
    ]
    for (const [text, id] of cases) expect(new Set(everySplit(text)), text).toEqual(new Set([id]))
  })

  it('finds no id when there is none a response could carry', () => {
    for (const text of [
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":null}',
      '{"jsonrpc":"2.0","id":1.5}',
      '{"jsonrpc":"2.0","id":{"nested":1}}',
      '[{"id":1}]',
      '"id"',
      `{"id":"${'x'.repeat(1100)}"}`,
      '{"params":{"id":5}}',
    ])
      expect(new Set(everySplit(text)), text).toEqual(new Set([undefined]))
  })

  it('keeps the first top-level id and stops reading after it', () => {
    expect(scan('{"id":1,"id":2}')).toBe(1)
    // Garbage after the id does not matter: the scanner has stopped.
    expect(scan('{"id":"a","x":}}}]]]')).toBe('a')
  })
})
