{{/* Names, labels and the values every template shares. */}}

{{- define "dejaq.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name; components append -etcd, -redis, -headless (so 52 at most). */}}
{{- define "dejaq.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "broker"). */}}
{{- define "dejaq.labels" -}}
helm.sh/chart: {{ include "dejaq.chart" .ctx }}
{{ include "dejaq.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: dejaq
{{- end -}}

{{- define "dejaq.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dejaq.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dejaq.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dejaq.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret holding the storage URL, and its key. */}}
{{- define "dejaq.storageSecret" -}}
{{- default (printf "%s-storage" (include "dejaq.fullname" .)) .Values.storage.existingSecret -}}
{{- end -}}
{{- define "dejaq.storageSecretKey" -}}
{{- if .Values.storage.existingSecret }}{{ .Values.storage.existingSecretKey }}{{ else }}url{{ end -}}
{{- end -}}

{{/* The storage URL the chart knows (empty with storage.existingSecret). */}}
{{- define "dejaq.storageUrl" -}}
{{- if .Values.redis.enabled -}}
{{- printf "redis://%s-redis:6379/0" (include "dejaq.fullname" .) -}}
{{- else -}}
{{- .Values.storage.url -}}
{{- end -}}
{{- end -}}

{{- define "dejaq.etcdHeadless" -}}
{{- printf "%s-etcd-headless" (include "dejaq.fullname" .) -}}
{{- end -}}

{{/* One member's DNS name: (dict "ctx" $ "i" 0). */}}
{{- define "dejaq.etcdMemberHost" -}}
{{- printf "%s-etcd-%d.%s.%s.svc.%s" (include "dejaq.fullname" .ctx) (int .i) (include "dejaq.etcdHeadless" .ctx) .ctx.Release.Namespace .ctx.Values.clusterDomain -}}
{{- end -}}

{{/* DEJAQ_ETCD: the bundled members' client URLs, or the external endpoints; empty = none. */}}
{{- define "dejaq.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $urls = append $urls (printf "http://%s:2379" (include "dejaq.etcdMemberHost" (dict "ctx" $ "i" $i))) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.etcd.externalEndpoints -}}
{{- end -}}
{{- end -}}

{{/* etcd's --initial-cluster: name=peer URL for every member. */}}
{{- define "dejaq.etcdInitialCluster" -}}
{{- $members := list -}}
{{- range $i := until (int .Values.etcd.replicaCount) -}}
{{- $members = append $members (printf "%s-etcd-%d=http://%s:2380" (include "dejaq.fullname" $) $i (include "dejaq.etcdMemberHost" (dict "ctx" $ "i" $i))) -}}
{{- end -}}
{{- join "," $members -}}
{{- end -}}

{{- define "dejaq.terminationGracePeriodSeconds" -}}
{{- add .Values.broker.preStopSeconds .Values.broker.gracefulStopSeconds .Values.broker.stopMarginSeconds -}}
{{- end -}}
