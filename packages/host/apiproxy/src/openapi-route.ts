import { type RouteResponse, routes } from '@dsh/protocol'
import { jsonRoute } from './route.js'

let document: Promise<RouteResponse<typeof routes.openapi>> | undefined

/**
 * `GET /api/openapi.json`: the OpenAPI 3.1 document of the route table, behind
 * the same token as every API route. The generator loads on the first request
 * and its document is built once (the table is fixed for the process).
 */
export const openApiRoute = jsonRoute(routes.openapi, () => {
  const built = document ?? import('@dsh/protocol/openapi').then(({ openApiDocument }) => openApiDocument())
  document = built
  return built
})
