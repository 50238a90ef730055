import OpenAI from 'openai'
import { afterEach, describe, expect, it } from 'vitest'
import { answer, callTools, type ModelServer, type ResponsesRequestBody, startModelServer } from '../src/testing/model-server.js'

let server: ModelServer | undefined
afterEach(async () => {
  await server?.close()
  server = undefined
})

describe('the test server speaks Responses (POST /v1/responses) to the real openai client', () => {
  it('streams text, reasoning and function calls as ResponseStreamEvents; the usage and the id arrive in response.completed', async () => {
    server = await startModelServer([
      answer(['Hel', 'lo'], { prompt: 30, completion: 9, cached: 10, reasoning: 4 }, ['think', 'ing']),
      callTools([{ id: 'call_1', name: 'add', arguments: '{"a":1,"b":2}' }]),
    ])
    const client = new OpenAI({ apiKey: 'k', baseURL: server.baseURL, maxRetries: 0 })
    const types: string[] = []
    let text = ''
    let reasoning = ''
    let completed: OpenAI.Responses.Response | undefined
    for await (const event of await client.responses.create({ model: 'm', input: 'hi', stream: true })) {
      types.push(event.type)
      if (event.type === 'response.output_text.delta') text += event.delta
      if (event.type === 'response.reasoning_summary_text.delta') reasoning += event.delta
      if (event.type === 'response.completed') completed = event.response
    }
    expect(text).toBe('Hello')
    expect(reasoning).toBe('thinking')
    expect(types[0]).toBe('response.created')
    expect(types.at(-1)).toBe('response.completed')
    expect(completed?.usage).toEqual({
      input_tokens: 30,
      input_tokens_details: { cached_tokens: 10, cache_write_tokens: 0 },
      output_tokens: 9,
      output_tokens_details: { reasoning_tokens: 4 },
      total_tokens: 39,
    })
    expect(server.reported[0]).toMatchObject({ request: 0, protocol: 'responses', model: 'm' })

    let args = ''
    const done: unknown[] = []
    const stream = await client.responses.create({ model: 'm', input: [], previous_response_id: completed!.id, stream: true })
    for await (const event of stream) {
      if (event.type === 'response.function_call_arguments.delta') args += event.delta
      if (event.type === 'response.output_item.done') done.push(event.item)
    }
    expect(args).toBe('{"a":1,"b":2}')
    expect(done).toEqual([
      { type: 'function_call', id: expect.any(String), call_id: 'call_1', name: 'add', arguments: args, status: 'completed' },
    ])
    const body = server.requests[1]!.body as unknown as ResponsesRequestBody
    expect(server.requests[1]!.protocol).toBe('responses')
    expect(body.previous_response_id).toBe(completed!.id)
  })

  it('refuses a previous_response_id it never issued, as OpenAI does (400), and asks no reply for it', async () => {
    server = await startModelServer([answer(['never'])])
    const client = new OpenAI({ apiKey: 'k', baseURL: server.baseURL, maxRetries: 0 })
    const refused = await client.responses
      .create({ model: 'm', input: 'hi', previous_response_id: 'resp_unknown', stream: true })
      .catch((e) => e)
    expect(refused).toBeInstanceOf(OpenAI.APIError)
    expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(400)
    expect((refused as InstanceType<typeof OpenAI.APIError>).message).toContain("Previous response with id 'resp_unknown' not found")
    expect(server.reported).toEqual([])
  })
})
