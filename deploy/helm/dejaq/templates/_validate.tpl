{{/*
Refuse, at render time, values that would strand messages or that the broker
cannot honour yet. Included by the Deployment, so `helm template` and
`helm install` fail with the message before anything is created.
*/}}
{{- define "dejaq.validate" -}}
{{- $sources := 0 -}}
{{- if .Values.storage.url }}{{ $sources = add1 $sources }}{{ end -}}
{{- if .Values.storage.existingSecret }}{{ $sources = add1 $sources }}{{ end -}}
{{- if .Values.redis.enabled }}{{ $sources = add1 $sources }}{{ end -}}
{{- if ne $sources 1 -}}
{{- fail "storage: set exactly one of storage.url, storage.existingSecret or redis.enabled=true (the bundled Redis); with your own storage, also set redis.enabled=false" -}}
{{- end -}}
{{- $url := include "dejaq.storageUrl" . -}}
{{- $replicas := int .Values.replicaCount -}}
{{- if and (gt $replicas 1) (hasPrefix "memory:" $url) -}}
{{- fail (printf "storage.url memory:// keeps messages inside one broker: with replicaCount=%d the others could never deliver them. Use Redis or PostgreSQL, or replicaCount=1" $replicas) -}}
{{- end -}}
{{- if and (gt $replicas 1) (hasPrefix "sqlite:" $url) -}}
{{- fail (printf "storage.url sqlite:// is a file inside one pod: with replicaCount=%d each broker would keep its own timeline. Use Redis or PostgreSQL, or replicaCount=1" $replicas) -}}
{{- end -}}
{{- if and .Values.etcd.enabled .Values.etcd.externalEndpoints -}}
{{- fail "etcd: set etcd.enabled=false to use etcd.externalEndpoints (or drop them to use the bundled etcd)" -}}
{{- end -}}
{{- if and (gt $replicas 1) (not (include "dejaq.etcdEndpoints" .)) -}}
{{- fail (printf "replicaCount=%d needs etcd to share the buckets: etcd.enabled=true or etcd.externalEndpoints" $replicas) -}}
{{- end -}}
{{- if .Values.broker.tls.enabled -}}
{{- fail "broker.tls.enabled: this dejaq version does not serve TLS yet (the security issue adds it); leave it false" -}}
{{- end -}}
{{- if or .Values.etcd.client.tls.enabled .Values.etcd.client.auth.enabled -}}
{{- fail "etcd.client.tls / etcd.client.auth: this dejaq version speaks plain HTTP to etcd without auth (the security issue adds both); leave them disabled" -}}
{{- end -}}
{{- end -}}
