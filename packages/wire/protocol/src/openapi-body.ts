import { z } from 'zod'

/**
 * The answer of `GET /api/openapi.json`: an OpenAPI 3.1 document. The route
 * table checks its frame only (version, info, paths); the document itself is
 * checked by an OpenAPI validator in the protocol's tests.
 */
export const openApiDocumentBody = z.looseObject({
  openapi: z.string().regex(/^3\.1\.[0-9]+$/),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  /** Each path's item: its operations by method. */
  paths: z.record(z.string(), z.looseObject({})),
})
