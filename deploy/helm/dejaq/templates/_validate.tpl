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
{{- include "dejaq.validateSecurity" . -}}
{{- if and .Values.broker.bridges.existingSecret (or .Values.broker.tls.enabled .Values.broker.auth.existingSecret) -}}
{{- fail "broker.bridges: the brokers' bridges reach them on loopback in plaintext with no token, so not with broker.tls or broker.auth; run `dejaq bridge run FILE` beside them instead" -}}
{{- end -}}
{{- end -}}

{{/* TLS and secrets: each switch names the Secret it needs, and the parts agree. */}}
{{- define "dejaq.validateSecurity" -}}
{{- range $what, $tls := dict "broker.tls" .Values.broker.tls "metrics.tls" .Values.metrics.tls "etcd.tls" .Values.etcd.tls "etcd.client.tls" .Values.etcd.client.tls "etcd.client.auth" .Values.etcd.client.auth -}}
{{- if and $tls.enabled (not $tls.existingSecret) -}}
{{- fail (printf "%s.enabled needs %s.existingSecret: the Secret holding its files" $what $what) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.broker.auth.existingSecret .Values.broker.auth.insecureAllowAnonymous -}}
{{- fail "broker.auth: set existingSecret (who may do what) or insecureAllowAnonymous, not both" -}}
{{- end -}}
{{- if and .Values.metrics.tls.enabled (not .Values.metrics.enabled) -}}
{{- fail "metrics.tls.enabled needs metrics.enabled=true" -}}
{{- end -}}
{{- if .Values.etcd.enabled -}}
{{- if ne .Values.etcd.tls.enabled .Values.etcd.client.tls.enabled -}}
{{- fail "etcd.tls and etcd.client.tls go together with the bundled etcd: over TLS it wants a client certificate from every broker, and without TLS it speaks plain HTTP" -}}
{{- end -}}
{{- else -}}
{{- if .Values.etcd.tls.enabled -}}
{{- fail "etcd.tls is for the bundled etcd (etcd.enabled=true); for an external one set etcd.client.tls and https:// endpoints" -}}
{{- end -}}
{{- $https := 0 -}}
{{- range .Values.etcd.externalEndpoints }}{{ if hasPrefix "https://" . }}{{ $https = add1 $https }}{{ end }}{{ end -}}
{{- if and $https (ne $https (len .Values.etcd.externalEndpoints)) -}}
{{- fail "etcd.externalEndpoints mix https:// and http://: use one scheme" -}}
{{- end -}}
{{- if and .Values.etcd.client.tls.enabled (not $https) -}}
{{- fail "etcd.client.tls.enabled needs https:// etcd.externalEndpoints" -}}
{{- end -}}
{{- end -}}
{{- with .Values.storage.passwordSecret.name -}}
{{- if or (not $.Values.storage.url) $.Values.redis.enabled -}}
{{- fail "storage.passwordSecret fills in the password of storage.url: set storage.url (without a password) and redis.enabled=false" -}}
{{- end -}}
{{- if regexMatch "^[a-z+]+://[^@/]*:[^@/]*@" $.Values.storage.url -}}
{{- fail "storage.url already carries a password: drop it from the URL when storage.passwordSecret gives it" -}}
{{- end -}}
{{- end -}}
{{- if not (or .Values.broker.auth.existingSecret .Values.broker.auth.insecureAllowAnonymous) -}}
{{- fail "broker.auth: set broker.auth.existingSecret=SECRET (a Secret holding the principals file, under key broker.auth.existingSecretKey: who may do what), or, to try dejaq out, broker.auth.insecureAllowAnonymous=true (anyone who reaches the Service may read, change and delete every topic). The brokers listen on the pod's address and refuse to start with neither" -}}
{{- end -}}
{{- end -}}
